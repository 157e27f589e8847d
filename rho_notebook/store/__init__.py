"""The durable local store: layout, private directories, atomic writes, IDs, plans and runs.

The face imports on first use (:func:`rho_notebook.lazy.lazy_face`): ``from rho_notebook.store
import read_journal`` loads the journal's reader, not the plan or run stores.
"""

from rho_notebook.lazy import lazy_face

_FACE = {
    "StoreLayout": "layout",
    "VALUE_FILE": "layout",
    "RESULT_FILE": "layout",
    "EXIT_FILE": "layout",
    "USAGE_FILE": "layout",
    "PROMPT_FILE": "layout",
    "ANSWER_TEXT_FILE": "layout",
    "ANSWER_PROSE_FILE": "layout",
    "TRANSCRIPT_FILE": "layout",
    "PlanStore": "plans",
    "RunStore": "runs",
    "RunFolder": "runs",
    "RunManifest": "runs",
    "OwnerLock": "runs",
    "ReuseIndex": "reuse",
    "JournalWriter": "journal",
    "JournalRead": "journal_reader",
    "read_journal": "journal_reader",
    "follow_journal": "journal_reader",
    "check_journal": "journal_integrity",
    "CHAINED": "journal_integrity",
    "atomic_write": "files",
    "atomic_write_json": "files",
    "read_nofollow": "files",
    "new_id": "ids",
}
__getattr__, __dir__ = lazy_face(__name__, _FACE)
__all__ = sorted(_FACE)
