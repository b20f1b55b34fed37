"""Names vulture cannot see used (`vulture`, configured in pyproject's [tool.vulture]).

Each is called or read by name from outside Python's call graph: a framework, a
serializer, or a string key.  Never imported or run; vulture only reads the names.
A name listed here that the code drops is still flagged by the attribute it was.
"""

# ruff: noqa: B018
from types import SimpleNamespace

_ = SimpleNamespace()

# typer: the app callback's --version option (its eager callback prints and exits)
_.show_version
# rich: a Console attribute the live view and the plain printer set
_.soft_wrap
# starlette: BaseHTTPMiddleware calls `dispatch` (campaign/cli/web/guard.py)
_.dispatch
# matplotlib: an Artist's draw order, read by the figure (campaign/journal/plot_labels.py)
_.zorder
# sqlite3 (through SQLAlchemy's connect event): the DB-API connection's transaction mode
_.isolation_level
# PEP 562: a module's __getattr__ (campaign/store/__init__.py)
_.__getattr__

# LangGraph: the campaign's state and a branch's result are TypedDicts whose keys the graph
# reads and merges by string (campaign/loop/state.py, campaign/loop/parallel.py); the
# checkpoint holds them, so a key stays while a saved campaign may carry it
_.node_index
_.adopted_config
_.need_baseline
_.infra_retries
_.candidate_sha
_.baseline_sha
_.env_changed
_.no_win_streak
_.dead_end_streak
_.baseline_attempt
_.reviews_done
_.baseline_patches

# pydantic fields written to the record (model_dump) and read back from it
_.rounds_baseline  # campaign/domain/records.py: the rounds behind a level's comparison
_.rounds_candidate
_.added_hypotheses  # campaign/store/records.py: hypotheses added at a resume
_.shortfall  # campaign/verdict/stacking.py: a stacked subset that fell short of its parts
# a playbook field validated for its message (tools/executors/slurm.py: any value but 1 is refused)
_.max_parallel_jobs

# the simulated node's engine flags: SGLang's names, accepted so a real launch line runs
# on it unchanged (tools/simnode/config.py); the model does not read them
_.speculative_draft_model_path
_.enable_torch_compile
_.enable_mixed_chunk
_.enable_p2p_check
_.trust_remote_code
_.schedule_policy
_.page_size
_.quantization
_.log_level
# a scheduled request's id (tools/simnode/batchcore.py): names it in the scheduler's repr
_.rid

# attributes of third-party objects the scripts and the browser tests configure
_.hf_quantizer  # transformers model (scripts/gguf_to_hf.py)
_.pre_tokenizer  # tokenizers Tokenizer (scripts/make_model.py)
_.decoder
_.binary_location  # selenium ChromeOptions (tests/campaign/web/browser.py)
