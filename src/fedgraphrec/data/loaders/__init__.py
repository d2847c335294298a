"""One loader per on-disk format; each validates its input and names the file and line on errors."""
