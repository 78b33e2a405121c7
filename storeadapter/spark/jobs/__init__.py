"""Spark jobs over a Tidemark store (never import Django): ``stats.topic_statistics``."""
