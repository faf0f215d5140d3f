"""What the faces answer with: questions, citations, migrations, diffs, explanations, the user's code checked."""
