"""The estimators on gradient-boosted trees: LightGBM and XGBoost trained on click logs.

:mod:`~ltr.clicks.engines.lightgbm` (lambdarank on the sessions with IPS weights or LightGBM's position-bias
model, policy-aware lists), :mod:`~ltr.clicks.engines.lambdamart` (Unbiased LambdaMART as a LightGBM
objective), :mod:`~ltr.clicks.engines.xgboost` (``lambdarank_unbiased``), :mod:`~ltr.clicks.engines.session_stream`
(a Parquet log's sessions gathered block by block). The top floor of :mod:`ltr.clicks`.
"""
