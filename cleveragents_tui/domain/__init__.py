"""The core: pydantic models, enums and invariants. No I/O, imports nothing of ours."""
