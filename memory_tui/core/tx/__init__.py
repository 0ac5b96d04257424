"""The one transaction path every change to the memory workspace goes through, one room per
step:

* ``api``         the entry points (``staged_edit``, ``update``, ``open_stage`` + ``commit_edits``,
                  ``rebuild_views``) and what each asks (``context``: rules, git, counter).
* ``optimistic``  the lock held only to install: prepare outside it, redo under it if the
                  workspace moved.
* ``stage``       the private copy a transaction builds in, and whether the workspace still
                  has the revision it was read at.
* ``prepare``     the steps of a prepared stage: ``checks`` (validation), ``normal``
                  (normalisation), ``derived`` (views and creation order).
* ``finish``      install, caches told, git commit; ``noop`` the remembered no-change answer.
* ``result``      ``TxResult``; ``provenance`` who supplies sources; ``recordops`` the owner's
                  record moves, updates and deletes, as ``update`` calls.
"""
