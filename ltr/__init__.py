"""ltr: a learning-to-rank training toolkit whose metric definitions feed both evaluation and training.

Sub-modules (imported on demand so that ``import ltr`` stays cheap):

- ``ltr.data``        flat ragged data set (features [N, F], labels [N], query offsets [Q+1]) and readers
- ``ltr.batching``    padded, length-bucketed torch batches
- ``ltr.normalize``   feature normalisation fitted on the training split
- ``ltr.synthetic``   seeded MSLR-like generator with users
- ``ltr.models``      linear and MLP scorers
- ``ltr.training``    the trainer (early stopping, TensorBoard, checkpoints)
- ``ltr.gbdt``        the LightGBM lambdarank baseline
- ``ltr.calibration`` Platt and isotonic calibrators with AUC-invariance checks
- ``ltr.auction``     bid x pCTR auctions
- ``ltr.click_models`` position-based and cascade click simulation
- ``ltr.propensity``  examination propensities from randomized or swapped traffic
- ``ltr.ips``         IPS / SNIPS estimates and inverse-propensity training sets
- ``ltr.open_bandit`` the Open Bandit logged-click sample
- ``ltr.ctr``         synthetic impressions with true click probabilities
- ``ltr.ablation``    grids of losses x data sets x seeds with statistics
- ``ltr.report_table`` markdown tables and interval cells of printed reports
- ``ltr.columns``     one-value-per-line (or .npy) score / label / id files; number fields of text files
"""

__version__ = "0.1.0"
