module example.com/avx

go 1.19
