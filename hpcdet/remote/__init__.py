"""hpcdet from a laptop: every command run on a cluster's login node over one SSH transport."""
