"""The 48 half-hour daily-cycle weights of the Lublin-Feitelson model's three built-in job classes.

`datasets.synthetic.daily_weights` computes them from scipy's regularised incomplete gamma
(``scipy.special.gammainc``), whose import costs ~0.2 s: a third of a small run's start-up. These are
the exact float64 results of that formula (float.hex, so every bit is kept) for the classes'
(ANUM, BNUM) of Lublin & Feitelson, JPDC 63(11), 2003 (the parameters in `datasets.synthetic`),
computed with scipy 1.17.1; `tests/test_startup.py` recomputes them with scipy and
requires bit equality. Other (ANUM, BNUM) pairs are computed with scipy as before.
"""
from __future__ import annotations

#: (ANUM, BNUM) -> the 48 weights (mean 1) as float.hex strings, bucket 0 = 00:00-00:30
DAILY_WEIGHTS: dict[tuple[float, float], tuple[str, ...]] = {
    # BATCH: ANUM=6.1271, BNUM=5.274
    (6.1271, 5.274): (
        "0x1.17a21bc1b4e64p-1", "0x1.00965eecbf0e8p-1", "0x1.d5eaa511fb6a5p-2", "0x1.ad75058a73b04p-2",
        "0x1.87bcc58f3d151p-2", "0x1.64adc25d8c13ep-2", "0x1.442fdbe6d384fp-2", "0x1.2627e38b18731p-2",
        "0x1.0a786e9b83665p-2", "0x1.e2051bd68de81p-3", "0x1.637c778a9f53dp-2", "0x1.cb2e4947d34f4p-2",
        "0x1.1e3307d92adf7p-1", "0x1.5a1ce361b39bcp-1", "0x1.97c43f2ead35dp-1", "0x1.d59520a25bd53p-1",
        "0x1.090627f6b0c72p+0", "0x1.25e3aab64a86bp+0", "0x1.40c808df7d991p+0", "0x1.593215b8cfb43p+0",
        "0x1.6ebc62f5ff1a9p+0", "0x1.811d8a5f1b211p+0", "0x1.90273544df2fbp+0", "0x1.9bc4306d9b5efp+0",
        "0x1.a3f5d58225736p+0", "0x1.a8d10a84c78ffp+0", "0x1.aa7b0df18f76ap+0", "0x1.a9263bdc00602p+0",
        "0x1.a50eee6cc25f9p+0", "0x1.9e7893035cf81p+0", "0x1.95ab0539dff2dp+0", "0x1.8af03a39b36efp+0",
        "0x1.7e92413d2b461p+0", "0x1.70d999b1cd46dp+0", "0x1.620bdc18a3bd1p+0", "0x1.526ab05b2c9afp+0",
        "0x1.42330ab0bbbd8p+0", "0x1.319ca73dd041fp+0", "0x1.20d9bc2b716ebp+0", "0x1.1016d9f1a919cp+0",
        "0x1.fef5e3b5ed46ap-1", "0x1.de4ef690a184cp-1", "0x1.be7161c62707ep-1", "0x1.9f8bbf4960b6dp-1",
        "0x1.81c384be32edep-1", "0x1.6535ca66e9468p-1", "0x1.49f81a3fd6d8dp-1", "0x1.301940f971855p-1",
    ),
    # INTERACTIVE: ANUM=8.9186, BNUM=3.668
    (8.9186, 3.668): (
        "0x1.06ea2f51d2ea2p-1", "0x1.d5d3664596f8bp-2", "0x1.a275675775240p-2", "0x1.7392f8079a87fp-2",
        "0x1.48fa33d1a01bep-2", "0x1.22718e59d22c5p-2", "0x1.ff748fc339e5ap-3", "0x1.c1250b830ba61p-3",
        "0x1.896e276758679p-3", "0x1.57c9a8b6f634bp-3", "0x1.e62b79092ff12p-4", "0x1.700640573f7edp-3",
        "0x1.07c0c7093411bp-2", "0x1.68cef0dc2c058p-2", "0x1.da17bc6839fe6p-2", "0x1.2cba381603b8ep-1",
        "0x1.71eb113462eb4p-1", "0x1.babfc9cdded3cp-1", "0x1.029214611e30ep+0", "0x1.27786e6b03c2cp+0",
        "0x1.4b05eb9268360p+0", "0x1.6c421b10e3dc9p+0", "0x1.8a5428a7d6196p+0", "0x1.a48a9f5da724cp+0",
        "0x1.ba5fe9d9454cap+0", "0x1.cb7bd12986458p+0", "0x1.d7b26617dfd44p+0", "0x1.df00d967bc099p+0",
        "0x1.e188cf9c55e75p+0", "0x1.df8ab8acc31f7p+0", "0x1.d95fa719a1effp+0", "0x1.cf730f78f1465p+0",
        "0x1.c23cc493c62d4p+0", "0x1.b23b6ed3fbe70p+0", "0x1.9fefa9975d83dp+0", "0x1.8bd7df16da0b1p+0",
        "0x1.766cec80c7e16p+0", "0x1.601f8be488fa0p+0", "0x1.4956788de9cfdp+0", "0x1.326d3c31b8a0ap+0",
        "0x1.1bb38f78f45afp+0", "0x1.056d36a46baafp+0", "0x1.dfa48589ce993p-1", "0x1.b61f41ecfbd69p-1",
        "0x1.8e8fc5aa4372fp-1", "0x1.69285b5d182d4p-1", "0x1.460a81141fa96p-1", "0x1.2549078e15ae7p-1",
    ),
    # TYPELESS: ANUM=8.1737, BNUM=3.9631
    (8.1737, 3.9631): (
        "0x1.040113f9dad99p-1", "0x1.d3119d01978abp-2", "0x1.a250ee130e287p-2", "0x1.759eb4c5dcc80p-2",
        "0x1.4cd0a06f7c4d0p-2", "0x1.27b5c2aa8fdd0p-2", "0x1.0618914d0d2f6p-2", "0x1.cf813fbda256ep-3",
        "0x1.98e828a8f50a4p-3", "0x1.67f1b7f4971b6p-3", "0x1.51c07640e0570p-3", "0x1.e941fe110862cp-3",
        "0x1.51347fa889986p-2", "0x1.bd8dcc8615f89p-2", "0x1.1bcdc78b8368cp-1", "0x1.5e393474bf6d0p-1",
        "0x1.a443112e241c0p-1", "0x1.ebf4fa6d7252fp-1", "0x1.19a446b238b6ep+0", "0x1.3c228e1ab6c23p+0",
        "0x1.5c8c73e202e7bp+0", "0x1.7a16613893119p+0", "0x1.9418d8aa35de9p+0", "0x1.aa14580f8a622p+0",
        "0x1.bbb291c74dea5p+0", "0x1.c8c564651a4f8p+0", "0x1.d14408f7df090p+0", "0x1.d546f3dd0c118p+0",
        "0x1.d502de1e0c883p+0", "0x1.d0c360bde63a8p+0", "0x1.c8e57ae556f4bp+0", "0x1.bdd249c104457p+0",
        "0x1.affa26d9a4f92p+0", "0x1.9fd050e29fbb6p+0", "0x1.8dc734312551bp+0", "0x1.7a4d5ba943c69p+0",
        "0x1.65cb090e246fap+0", "0x1.50a06c31dc70cp+0", "0x1.3b246b497873dp+0", "0x1.25a3eb60c565dp+0",
        "0x1.1061863b9db1fp+0", "0x1.f72b351818ae8p-1", "0x1.cedd47ec19bf5p-1", "0x1.a8239337b8eb3p-1",
        "0x1.8337274706434p-1", "0x1.60417439f7832p-1", "0x1.3f5e03802e327p-1", "0x1.209c3a06ee992p-1",
    ),
}
