# %% [markdown]
# # neural_vs_gbdt

# %%
print(1)
