"""Changes made on behalf of a console or API user: the engine call and its audit row.

The pages (console/*/views.py) and the REST API (console/api/) both call these, so a
change is made and audited the same way whichever door it came through. Each function
raises the engine's ``StoreError`` subclasses unchanged when the engine refuses.
"""
