"""Sentence similarity: encoders and their embeddings, the STS-tuned head, the regressor's features, STS-B and SICK."""
