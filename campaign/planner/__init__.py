"""campaign/planner"""
