"""The Ascend C kernels on the project's CPU simulator (`simulator`, impl="sim") and the FLCE
TilingFunc built against CANN's Matmul tiling library (`cann_tiling`)."""
