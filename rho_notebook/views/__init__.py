"""What the DAG view shows, shared by widgets, server and CLI: node views, layout and text.

Built from the service's records; nothing here imports a front end's framework.
"""
