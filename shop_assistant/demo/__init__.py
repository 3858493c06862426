"""The demo store: its catalog file, documents, prompt and staff logins (``store.load_demo_store``)."""
