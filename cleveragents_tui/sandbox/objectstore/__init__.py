"""The content-addressed object store of the filesystem_copy and overlay sandboxes.

Blobs and trees (:mod:`.objects`, :mod:`.packs`, :mod:`.trees`), the checked names they are
stored under (:mod:`.names`), and the only writer of a sandbox's directory (:mod:`.tree_writer`).
"""
