# Wrong: rounds to 6 decimals first, then to 4: 0.12344996 -> 0.123450 -> 0.1235, where one
# rounding gives 0.1234.
import ai006_reference as ref


def double_round(x):
    s = f"{float(f'{x:.6f}'):.4f}"
    return "0.0000" if s == "-0.0000" else s


ref.FORMAT = double_round
ref.main()
