"""End-to-end privacy audits of the release mechanism (``bngp audit-mechanism``).

Where :mod:`bngp.audit` turns scores into bounds, this package produces the scores: it runs the
release x = clip(f(D) + xi, 0, 1) under any defense on datasets it designs, fits an attack on
the knowledge that attack may have, scores, and hands the scores to :mod:`bngp.audit`.

* :mod:`~bngp.mechanism_audit.canary`: canary audits, one run (Steinke, Nasr, Jagielski,
  arXiv:2305.08846) and many runs (Clopper-Pearson per canary; pooled one-run bound).
* :mod:`~bngp.mechanism_audit.haplotype_model`: a Li & Stephens (2003) haplotype-copying generator of
  synthetic individuals.
* :mod:`~bngp.mechanism_audit.panoramia_genome`: PANORAMIA (Kazmi et al., arXiv:2402.09477) with
  generated non-members (a measurement), and its companion lower bound with real non-members held
  out from the generator; who is where in :mod:`~bngp.mechanism_audit.panoramia_sets`, the
  baseline classifier and the release-aware MIA in :mod:`~bngp.mechanism_audit.panoramia_classifiers`.
* :mod:`~bngp.mechanism_audit.dispatch`: :func:`audit_mechanism`, the single entry point.
* :mod:`~bngp.mechanism_audit.results`: :class:`MechanismAuditResult`, the AUDIT.json record
  (``format`` :data:`MECHANISM_AUDIT_FORMAT`), with the design's ceiling and the claim's verdict.
"""

from bngp.mechanism_audit.canary import CanaryPrior, many_run_mechanism_audit, one_run_mechanism_audit
from bngp.mechanism_audit.haplotype_model import (
    DEFAULT_MISMATCH_GRID,
    DEFAULT_SWITCH_GRID,
    GeneratorDiagnostics,
    HaplotypeCopyingModel,
    adjacent_r2,
    compare_genotypes,
)
from bngp.mechanism_audit.dispatch import DEFAULT_RUNS, audit_mechanism
from bngp.mechanism_audit.panoramia_classifiers import genotype_features
from bngp.mechanism_audit.panoramia_genome import panoramia_mechanism_audit
from bngp.mechanism_audit.panoramia_sets import (
    MIN_GENERATOR_PANEL,
    MIN_TRAINING_MEMBERS,
    PanoramiaDesign,
    panoramia_design,
)
from bngp.mechanism_audit.results import (
    MECHANISM_AUDIT_FORMAT,
    MODES,
    NEIGHBOURING,
    MechanismAuditResult,
    claimed_guarantee,
    resolve_neighbouring,
)

__all__ = [
    "CanaryPrior",
    "DEFAULT_MISMATCH_GRID",
    "DEFAULT_RUNS",
    "DEFAULT_SWITCH_GRID",
    "GeneratorDiagnostics",
    "HaplotypeCopyingModel",
    "MECHANISM_AUDIT_FORMAT",
    "MIN_GENERATOR_PANEL",
    "MIN_TRAINING_MEMBERS",
    "MODES",
    "MechanismAuditResult",
    "NEIGHBOURING",
    "PanoramiaDesign",
    "adjacent_r2",
    "audit_mechanism",
    "claimed_guarantee",
    "compare_genotypes",
    "genotype_features",
    "many_run_mechanism_audit",
    "one_run_mechanism_audit",
    "panoramia_design",
    "panoramia_mechanism_audit",
    "resolve_neighbouring",
]
