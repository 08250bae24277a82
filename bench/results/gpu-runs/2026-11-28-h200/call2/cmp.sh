# issue 39: the resample's candidates in one evaluation and CUDA's larger chunks, old against new
export LMTRAIN_GPU_PKG=$PWD/build/gpu-pkg
LMTRAIN_GPU_PINN_SECONDS=45 OUT=$OUT/new bash scripts/gpu-run.sh --stages ext,pinn
O=/tmp/oldpkg; rm -rf $O; cp -r $LMTRAIN_GPU_PKG $O; cp .gpu/pinn-728679e.py $O/lmtrain/torch/pinn.py
cores=$(nproc)
PYTHONPATH=$O OMP_NUM_THREADS=$cores timeout 100 python3 examples/pinn/burgers.py --budget 45 --set device=cuda --quiet > $OUT/old-recipe.txt 2>&1; echo "rc $?" >> $OUT/old-recipe.txt
PYTHONPATH=$O OMP_NUM_THREADS=$cores timeout 60 python3 scripts/gpu-python/pinn_profile.py --device cuda > $OUT/old-profile.txt 2>&1; echo "rc $?" >> $OUT/old-profile.txt
cat $OUT/new/summary.txt; grep -E "LM steps|relative L2 error|ms per step" $OUT/old-recipe.txt; grep -E "^pinn_profile|ms per iteration|per iteration" $OUT/old-profile.txt
