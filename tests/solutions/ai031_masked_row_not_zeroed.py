# Wrong: a row with no visible key attends to every key instead of printing zeros.
import ai031_reference as ref

ref.ALL_MASKED = lambda n: list(range(n))
ref.main()
