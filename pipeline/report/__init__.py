"""What people read: the end-of-run table, report.html, and the pipeline's graph."""
