"""tools/simnode"""
