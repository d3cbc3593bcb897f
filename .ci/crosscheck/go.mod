module crosscheck

go 1.26.8
