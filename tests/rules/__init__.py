"""One test module per rule (test_ampNNN.py); examples.py holds the checks they share."""
