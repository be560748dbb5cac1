"""Persistence: SQLAlchemy 2.0 ORM, Alembic migrations, repositories and a unit of work."""
