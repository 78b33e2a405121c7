"""The Tidemark Django project: settings, URLs and the console apps."""
