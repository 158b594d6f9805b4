"""The embedding capability's pure rules: the lane's settings and admission (lane.py), its
verdicts (lane_evidence.py) and rows (lane_rows.py), the band, batch caps,
the input format, reuse of vectors, and the provider kinds."""
