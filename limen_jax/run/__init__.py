"""What one run needs beside the loop: its state, where it starts, how a batch is recorded."""
