"""tools/engines"""
