# Wrong: the heads are concatenated in reverse order (head g written to block h - 1 - g).
import ai031_reference as ref

ref.OUTPUT_COLUMNS = lambda g, h, hd: range((h - 1 - g) * hd, (h - g) * hd)
ref.main()
