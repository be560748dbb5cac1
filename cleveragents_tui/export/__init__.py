"""Exports of read models: JSON documents (stable, versioned formats) and PNG pictures."""
