"""The embedding capability's pure rules: the lane's verdicts (lane.py), the band, batch
caps, the input format, reuse of vectors, and the provider kinds."""
