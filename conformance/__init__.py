"""The conformance suite: one set of cases that every backend must pass.

Run it with `pytest --recallstack-backend NAME` (a throwaway instance from the
backend's plugin) or `pytest --recallstack-url URL` (your own deployment), or
`recallstack conformance`. See the README's "Writing a backend plugin".
"""
