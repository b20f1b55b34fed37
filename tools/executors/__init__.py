"""tools/executors"""
