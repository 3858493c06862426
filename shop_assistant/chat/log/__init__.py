"""The chat log and its durability: conversations, message writes, the Celery task, the spool, keeping an answer, closing, feedback, handoff, agents' messages."""
