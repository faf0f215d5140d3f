"""The catalog's language: expressions, points, geometry, anchors, decimals."""
