# %% [markdown]
# # clicks

# %%
print(1)
