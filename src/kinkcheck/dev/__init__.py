"""Development tools: the benchmark, CI's plan, README's figures, the release matrix."""
