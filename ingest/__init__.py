"""Input formats → kb records. Each module knows one format and nothing about advice."""
