"""The pipeline's nodes translated into Spark DataFrames: the translation context and the
registry of translators (`context`), and one module per family of transforms, each holding
its batch and streaming translators side by side.
"""
