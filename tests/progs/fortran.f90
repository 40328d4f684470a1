! Copyright 2026 the qpt authors
! SPDX-License-Identifier: MIT
!
! Fortran: DO loops over arrays, a subroutine with INTENT arguments, a recursive
! function, SELECT CASE with ranges (a jump table or compare chain) and a module
! variable. Ends with STOP 4, so the status is 4 and "STOP 4" goes to stderr.
module counters
  implicit none
  integer :: ncalls = 0
end module counters

program fortran_test
  use counters
  implicit none
  integer :: i, j, total, hist(0:5)
  integer :: a(50)
  real(8) :: x

  do i = 1, 50
    a(i) = mod(i * 37 + 11, 101)
  end do
  call bubble(a, 50)
  print '(A,I0,A,I0,A,I0)', 'sorted: first=', a(1), ' mid=', a(25), ' last=', a(50)

  hist = 0
  do i = 1, 50
    j = classify(a(i))
    hist(j) = hist(j) + 1
  end do
  print '(A,6I4)', 'hist:', hist

  total = 0
  do i = 1, 10
    do j = i, 10
      total = total + i * j
    end do
  end do
  x = 0.0d0
  do i = 1, 100
    x = x + 1.0d0 / dble(i * i)
  end do
  print '(A,I0,A,F10.6,A,I0)', 'total=', total, ' basel=', x, ' fact10=', fact(10)
  print '(A,I0)', 'ncalls=', ncalls
  stop 4

contains

  subroutine bubble(v, n)
    integer, intent(in) :: n
    integer, intent(inout) :: v(n)
    integer :: p, q, t
    do p = 1, n - 1
      do q = 1, n - p
        if (v(q) > v(q + 1)) then
          t = v(q); v(q) = v(q + 1); v(q + 1) = t
        end if
      end do
    end do
  end subroutine bubble

  integer function classify(k)
    integer, intent(in) :: k
    ncalls = ncalls + 1
    select case (k)
    case (:9)
      classify = 0
    case (10:19, 90:)
      classify = 1
    case (20, 22, 24, 26, 28)
      classify = 2
    case (21, 23, 25, 27, 29)
      classify = 3
    case (30:59)
      classify = 4
    case default
      classify = 5
    end select
  end function classify

  recursive integer function fact(n) result(r)
    integer, intent(in) :: n
    if (n <= 1) then
      r = 1
    else
      r = n * fact(n - 1)
    end if
  end function fact

end program fortran_test
