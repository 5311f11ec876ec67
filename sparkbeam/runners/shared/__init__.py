"""What both runners use: aggregate state, file reading, watermark alignment."""
