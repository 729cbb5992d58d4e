"""The steps the arm notebooks call: open an arm (its engine and run directory), size it, gate it,
sweep it, and the tables each notebook shows."""
