# Wrong: the causal mask is off by one, row i also sees key i + 1 (j <= i + 1 instead of j <= i).
import ai006_reference as ref

ref.VISIBLE_END = lambda i, n: min(i + 2, n)
ref.main()
