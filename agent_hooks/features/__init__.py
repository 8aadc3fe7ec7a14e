"""One concern per module. Features read and write the store; they never print."""
