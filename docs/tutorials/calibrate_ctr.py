# %% [markdown]
# # calibrate_ctr

# %%
print(1)
