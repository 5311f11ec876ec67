"""What translators and late-row filters build Spark frames from: Spark types of the model's
schemas and Arrow conversions (`arrow`), time columns as integers (`units`), expressions
compiled to Spark columns (`expressions`), the Python functions run on the workers
(`python_functions`) and keyed state in a `transformWithState` (`keyed_state`).
"""
