"""What the tests share: helpers, fake servers, and the programs they start."""
