"""Would ONNX Runtime's fused attention operators pay on Morph's encoder? One layer's attention
at an AG News batch's shape (8 x 65 tokens, 12 heads of 32), 2 threads (or the number given:
1 is each instance of the 2-core host's served layout), spinning off (as Morph runs its sessions),
median of 200 runs:
  - Morph's pattern (Split, Reshape, Transpose, MatMul, Add mask, Softmax, MatMul, Transpose,
    Reshape), its padded keys biased by -30 (as now) and by -1e9 (as before), against
    com.microsoft MultiHeadAttention on the same Q, K, V;
  - com.microsoft Attention (the Q/K/V product inside, fp32) against an fp32 MatMul + Add and
    Morph's pattern;
  - MultiHeadAttention with its padded keys at -30 (`mask_filter_value`) as Morph's are, alone
    and inside the padding-removed graph's attention block as served (packed Q/K/V in, gathered
    into the padded layout and the output packed again), against that block as Morph writes it.
Needs onnxruntime and onnx (the venv experiments/peers.sh makes, $MORPH_PEERS/export-venv, has both):
    ~/.cache/morph-peers/export-venv/bin/python experiments/attention_fusion.py [THREADS]
"""
import sys, time, numpy as np, onnxruntime as ort
from onnx import helper as h, TensorProto as T
B,S,H,N = 8,65,384,12; D=H//N
THREADS = int(sys.argv[1]) if len(sys.argv) > 1 else 2
rng=np.random.default_rng(0)
def sess(model):
    o=ort.SessionOptions(); o.intra_op_num_threads=THREADS; o.inter_op_num_threads=1
    o.add_session_config_entry("session.intra_op.allow_spinning","0")
    o.graph_optimization_level=ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), o, providers=["CPUExecutionProvider"])
def mk(nodes, inputs, outputs, inits=[]):
    g=h.make_graph(nodes,"g",inputs,outputs,inits)
    m=h.make_model(g,opset_imports=[h.make_opsetid("",17),h.make_opsetid("com.microsoft",1)])
    m.ir_version=8
    return m
def const(name, arr, dt=T.FLOAT): return h.make_tensor(name, dt, arr.shape, arr.flatten().tolist())
qkv_in=h.make_tensor_value_info("qkv",T.FLOAT,[B,S,3*H])
bias_in=h.make_tensor_value_info("bias",T.FLOAT,[B,1,1,S])
out=h.make_tensor_value_info("y",T.FLOAT,[B,S,H])
def pattern(q, k, v, shape, y):
    """Morph's attention on padded Q, K, V [B, S, H] (heads split by `shape4`), output reshaped by `shape`."""
    nodes=[]
    for t,perm in ((q,[0,2,1,3]),(k,[0,2,3,1]),(v,[0,2,1,3])):
        nodes+= [h.make_node("Reshape",[t,"shape4"],[t+"r"]), h.make_node("Transpose",[t+"r"],[t+"t"],perm=perm)]
    return nodes+[h.make_node("MatMul",[q+"t",k+"t"],["s"]),h.make_node("Add",["s","bias"],["sb"]),h.make_node("Softmax",["sb"],["p"],axis=-1),
        h.make_node("MatMul",["p",v+"t"],["c"]),h.make_node("Transpose",["c"],["ct"],perm=[0,2,1,3]),h.make_node("Reshape",["ct",shape],[y])]
# (a) Morph's pattern
nodes=[h.make_node("Split",["qkv","split"],["q","k","v"],axis=2)]+pattern("q","k","v","shape3","y")
a=mk(nodes,[qkv_in,bias_in],[out],[const("split",np.array([H,H,H],np.int64),T.INT64),const("shape4",np.array([0,0,N,D],np.int64),T.INT64),const("shape3",np.array([0,0,H],np.int64),T.INT64)])
# (b) MultiHeadAttention, separate q,k,v, key padding mask int32 [B,S]
mask_in=h.make_tensor_value_info("mask",T.INT32,[B,S])
nodes=[h.make_node("Split",["qkv","split"],["q","k","v"],axis=2),
       h.make_node("MultiHeadAttention",["q","k","v","","mask"],["y"],domain="com.microsoft",num_heads=N,scale=1.0)]
b=mk(nodes,[qkv_in,mask_in],[out],[const("split",np.array([H,H,H],np.int64),T.INT64)])
# (b30) the same, its padded keys at -30 as Morph's
b30=mk([h.make_node("Split",["qkv","split"],["q","k","v"],axis=2),
        h.make_node("MultiHeadAttention",["q","k","v","","mask"],["y"],domain="com.microsoft",num_heads=N,scale=1.0,mask_filter_value=-30.0)],
       [qkv_in,mask_in],[out],[const("split",np.array([H,H,H],np.int64),T.INT64)])
# (c) Attention with the QKV product inside (fp32 weights)
x_in=h.make_tensor_value_info("x",T.FLOAT,[B,S,H])
W=rng.standard_normal((H,3*H)).astype(np.float32)*0.05; bb=np.zeros(3*H,np.float32)
nodes=[h.make_node("Attention",["x","W","bb","mask"],["y"],domain="com.microsoft",num_heads=N)]
c=mk(nodes,[x_in,mask_in],[out],[const("W",W),const("bb",bb)])
nodes=[h.make_node("MatMul",["x","W"],["xw"]),h.make_node("Add",["xw","bb"],["qkv"])]
c0=mk(nodes,[x_in],[h.make_tensor_value_info("qkv",T.FLOAT,[B,S,3*H])],[const("W",W),const("bb",bb)])
lens=rng.integers(20,S+1,B); lens[0]=S
m=(np.arange(S)[None,:]<lens[:,None])
qkv=rng.standard_normal((B,S,3*H)).astype(np.float32); x=rng.standard_normal((B,S,H)).astype(np.float32)
def padded_key_bias(b): return ((m.astype(np.float32)-1)*b)[:,None,None,:].astype(np.float32)
biasv=padded_key_bias(30)
def t(s,feed,n=200):
    for _ in range(10): s.run(None,feed)
    ts=[]
    for _ in range(n):
        t0=time.perf_counter(); s.run(None,feed); ts.append(time.perf_counter()-t0)
    return np.median(ts)*1e3
# (d) the padding-removed block: packed [tokens, 3H] in, packed [tokens, H] out. `to_padded`
# gives each padded position a packed row (a padding position a copy of a real one), `real` each
# real position's flat index in the padded layout.
real_rows=int(m.sum()); real=np.nonzero(m.reshape(-1))[0].astype(np.int64)
to_padded=np.maximum(np.cumsum(m.reshape(-1))-1,0).astype(np.int64)
packed_in=[h.make_tensor_value_info("packed",T.FLOAT,[real_rows,3*H]),h.make_tensor_value_info("to_padded",T.INT64,[B*S]),
           h.make_tensor_value_info("real",T.INT64,[real_rows])]
packed_out=h.make_tensor_value_info("y",T.FLOAT,[real_rows,H])
shapes=[const("split",np.array([H,H,H],np.int64),T.INT64),const("bsh",np.array([B,S,H],np.int64),T.INT64),
        const("shape4",np.array([0,0,N,D],np.int64),T.INT64),const("flat",np.array([B*S,H],np.int64),T.INT64)]
def padded(t): return [h.make_node("Gather",[t,"to_padded"],[t+"g"],axis=0),h.make_node("Reshape",[t+"g","bsh"],[t+"p"])]
n=[h.make_node("Split",["packed","split"],["q","k","v"],axis=-1)]+padded("q")+padded("k")+padded("v")
n+=pattern("qp","kp","vp","flat","cf")+[h.make_node("Gather",["cf","real"],["y"],axis=0)]
d=mk(n,packed_in+[bias_in],[packed_out],shapes)
n=[h.make_node("Split",["packed","split"],["q","k","v"],axis=-1)]+padded("q")+padded("k")+padded("v")
n+=[h.make_node("MultiHeadAttention",["qp","kp","vp","","mask"],["c"],domain="com.microsoft",num_heads=N,scale=1.0,mask_filter_value=-30.0),
    h.make_node("Reshape",["c","flat"],["cf"]),h.make_node("Gather",["cf","real"],["y"],axis=0)]
dm=mk(n,packed_in+[mask_in],[packed_out],shapes)
packed=rng.standard_normal((real_rows,3*H)).astype(np.float32)
fd={"packed":packed,"to_padded":to_padded,"real":real}
sa,sb,sc,sc0=sess(a),sess(b),sess(c),sess(c0)
ya=sa.run(None,{"qkv":qkv,"bias":biasv})[0]; yb=sb.run(None,{"qkv":qkv,"mask":m.astype(np.int32)})[0]
print("max diff a vs b on real rows:", np.abs((ya-yb)[m]).max())
ta=t(sa,{"qkv":qkv,"bias":biasv}); tb=t(sb,{"qkv":qkv,"mask":m.astype(np.int32)})
ta_big=t(sa,{"qkv":qkv,"bias":padded_key_bias(1e9)})
tc=t(sc,{"x":x,"mask":m.astype(np.int32)}); tc0=t(sc0,{"x":x})
print(f"attention core per layer, {B}x{S}: Morph pattern {ta:.3f} ms (padded keys at -1e9: {ta_big:.3f}), MultiHeadAttention {tb:.3f} ms; x6 layers saves {6*(ta-tb):.2f} ms")
print(f"Attention (with fp32 QKV product) {tc:.3f} ms vs fp32 QKV MatMul+Add {tc0:.3f} + pattern {ta:.3f} = {tc0+ta:.3f} ms")
sb30,sd,sdm=sess(b30),sess(d),sess(dm)
yb30=sb30.run(None,{"qkv":qkv,"mask":m.astype(np.int32)})[0]
yd=sd.run(None,{**fd,"bias":biasv})[0]; ydm=sdm.run(None,{**fd,"mask":m.astype(np.int32)})[0]
print("max diff, MultiHeadAttention at -30 vs the pattern on real rows:", np.abs((ya-yb30)[m]).max(), "; in the packed block:", np.abs(yd-ydm).max())
tb30=t(sb30,{"qkv":qkv,"mask":m.astype(np.int32)})
td=t(sd,{**fd,"bias":biasv}); tdm=t(sdm,{**fd,"mask":m.astype(np.int32)})
print(f"MultiHeadAttention at -30: {tb30:.3f} ms vs the pattern's {ta:.3f}; the padding-removed block: as written {td:.3f} ms, with MultiHeadAttention {tdm:.3f} ms ({tdm/td:.2f}x)")
